"""scopeguard.evaluation"""
