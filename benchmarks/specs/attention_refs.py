"""The attention example's reference, for the specs beside this file that time
``examples/flash_attn.cu`` at other tolerances."""

from kir.examples.refs import flash_attn

__all__ = ["flash_attn"]
