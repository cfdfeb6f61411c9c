"""torchport.train"""
