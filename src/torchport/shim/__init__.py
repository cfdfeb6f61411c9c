"""torchport.shim"""
