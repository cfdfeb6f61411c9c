"""torchport.migrate"""
