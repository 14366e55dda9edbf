"""Registered scorers, one module per scorer family."""
