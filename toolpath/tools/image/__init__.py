"""Image operations as tools, for models that do not write code (DeepEyesV2's crop/zoom and friends)."""
