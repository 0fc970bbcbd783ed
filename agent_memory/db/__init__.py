"""Database plumbing: connections, the embedded server, migrations and the I/O drivers."""
