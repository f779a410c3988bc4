"""Test package (so helpers such as ``tests.stub_server`` import as modules)."""
