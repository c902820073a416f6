"""Models: named model sources (torchvision, timm, factory files, NAS records) -> ``nn.Module``, native resolution,
globs; the curated model sets and families."""
