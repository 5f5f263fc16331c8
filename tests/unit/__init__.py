"""Tests in one process: the database and Redis are real, the model is the simulator or a fake."""
