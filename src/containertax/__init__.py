"""containertax: does running GPU inference in a container cost throughput, latency or memory?"""

__version__ = "0.1.0"
