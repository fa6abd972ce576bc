"""Test helpers shared across test packages: real servers started on loopback and always stopped."""
