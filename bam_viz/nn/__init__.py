"""The network: the stochastic attention layer and the BERT encoder it sits in."""
