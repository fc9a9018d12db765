"""scopeguard.verification"""
