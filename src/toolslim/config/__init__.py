"""Configuration: the option table (every default), value checks, Settings and the docs made
from the table."""
