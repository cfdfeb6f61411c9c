"""torchport.emulate"""
