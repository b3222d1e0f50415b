"""Tools on top of the library: lt.explain, lt.profile and the demo."""
