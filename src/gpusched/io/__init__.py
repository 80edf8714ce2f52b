"""Reading and writing what users give gpusched: traces, clusters, workloads and profiles."""
