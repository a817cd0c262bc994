"""Evaluation: decision parsing, metrics, resumable runs and reports."""
