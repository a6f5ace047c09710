"""ALBIC (004): the MILP per period against Flux, scale-in, COLA's collocation, the Wikipedia chain, the cap."""
