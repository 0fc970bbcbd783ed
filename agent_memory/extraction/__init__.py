"""Automatic extraction: conversations (layer 1) become memory items (layer 2)."""
