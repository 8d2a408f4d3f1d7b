"""The twin appendix's account of where the reference runs trained."""

from compgen.figures import twin


def test_training_time_is_reported_per_device_with_the_runs_sharing_it():
    runs = [
        {"wall_s": 600.0},  # recorded before runs named their device: these CPUs
        {"wall_s": 300.0, "device": "gpu:NVIDIA H200", "runs_at_a_time": 16},
        {"wall_s": 300.0, "device": "gpu:NVIDIA H200", "runs_at_a_time": 4},
    ]
    assert twin._where_trained(runs) == (
        "10 minutes of training on two CPU cores; 10 minutes of training on NVIDIA H200, up to 16 runs at a time"
    )
    assert twin._where_trained(runs[:1]) == "10 minutes of training on two CPU cores"
