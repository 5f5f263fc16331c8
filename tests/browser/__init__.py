"""Tests in Debian's Chromium driven by Playwright, over the live stack."""
