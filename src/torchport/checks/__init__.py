"""torchport.checks"""
