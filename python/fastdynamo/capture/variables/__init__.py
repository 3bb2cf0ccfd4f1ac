"""Variable trackers: what the translator knows about each value, by kind."""
