"""Development helpers shared by the tests, the demo and the benchmark. Not deployed."""
