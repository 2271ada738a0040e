"""The only package that knows perf's command lines and output formats.

A perf version change should touch this package and nothing else.
"""
