"""One Router per resource."""
