"""torchport.data"""
