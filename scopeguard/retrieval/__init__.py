"""scopeguard.retrieval"""
