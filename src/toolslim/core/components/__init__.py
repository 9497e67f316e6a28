"""core/components"""
