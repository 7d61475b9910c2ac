"""Images as implicit neural representations: an MLP from pixel coordinates to colour, fitted per image.

activations (COSMO's BandRC and the SIREN, WIRE, Gauss and FINER baselines), network (the MLP built from any
of them, widths chosen for one parameter budget), prior (COSMO's optional image-conditioned band prior, from
a user's CNN weights), fit (Adam, seeded, bounded in steps and seconds), restore (denoise, super-resolution,
inpainting on top of fit), metrics (PSNR/SSIM), tools (`inr_fit`, `inr_restore`).
"""
