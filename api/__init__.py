"""The falcon WSGI API of jobpost: the v1.1 employer endpoints, health and metrics."""
