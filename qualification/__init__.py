"""Hardware qualification: evidence bound to the exact tree, workload, model and host."""
