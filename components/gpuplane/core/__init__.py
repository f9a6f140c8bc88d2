"""Core records every layer shares: findings, the stack's intent, chart sources, images."""
