"""scopeguard.review"""
