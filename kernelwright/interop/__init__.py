"""Other projects' layouts: KernelBench's run folders (export our best candidates, read its generations)."""
