"""autoprof: measure every performance event a CPU offers, without multiplexing."""

__version__ = "0.1.0"
