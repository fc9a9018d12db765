"""scopeguard.generation"""
