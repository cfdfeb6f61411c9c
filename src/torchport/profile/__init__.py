"""torchport.profile"""
