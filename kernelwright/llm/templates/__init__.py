"""Markdown templates of the exchange provider (a package so that wheels include them)."""
