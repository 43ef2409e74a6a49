"""The package version, on the ground floor so that every module can sign with it."""

__version__ = "0.1.0"
