"""torchport.bench"""
