"""SciPy for traced values: plain SciPy calls work on them, and mirrors with SciPy's names.

After ``import fusegrad`` these SciPy functions differentiate as written, with no change of
imports: ``scipy.special.logsumexp``, ``softmax``, ``log_softmax``, ``polygamma``, ``zeta`` and
every ``scipy.special`` ufunc with a rule (``gammaln``, ``erf``, ``jv``, ...); the ``logpdf``,
``pdf``, ``logcdf``, ``cdf``, ``sf``, ``logsf``, ``logpmf`` and ``pmf`` methods of
``scipy.stats``'s ``norm``, ``t``, ``gamma``, ``beta``, ``expon``, ``laplace``, ``cauchy``,
``logistic``, ``uniform``, ``lognorm``, ``chi2``, ``halfnorm``, ``weibull_min``, ``pareto``,
``invgamma``, ``gumbel_r``, ``rayleigh``, ``poisson``, ``binom``, ``bernoulli``, ``geom``,
``nbinom``, ``dirichlet`` and ``multivariate_normal`` (frozen or not; ``ppf``/``isf`` too where
the inverse has a closed form);
``scipy.linalg``'s ``solve_triangular``, ``cholesky``, ``cho_factor``, ``cho_solve``, ``inv``,
``det``, ``solve``, ``expm``, ``sqrtm``, ``lu_factor``, ``lu_solve``, ``toeplitz``,
``circulant``, ``hankel`` and ``block_diag``; ``scipy.signal``'s ``convolve``, ``correlate``,
``fftconvolve``, ``oaconvolve``, ``lfilter`` and ``sosfilt``; ``scipy.stats``' ``zscore``,
``zmap``, ``variation`` and ``iqr``; ``scipy.fft``'s Fourier transforms (``fft``, ``rfft``,
``irfftn``, ...), ``fftshift``, ``ifftshift`` and ``dct``/``idct``/``dst``/``idst`` (and their
N-D forms), types 1-4 (reached as a ``scipy.fft`` backend: SciPy's transforms are uarray
multimethods); ``scipy.integrate.odeint`` (adjoint method, first order),
``cumulative_trapezoid`` and ``cumulative_simpson``; ``scipy.special.comb``/``factorial``;
``scipy.signal.convolve2d``/``correlate2d``; ``scipy.ndimage``'s linear filters
(``correlate``, ``convolve``, ``gaussian_filter``, ``uniform_filter`` and their ``1d`` forms);
``scipy.spatial.distance``'s ``cdist``, ``pdist``, ``squareform``; ``scipy.stats.vonmises`` and
``multinomial``. The same functions
are in ``fusegrad.scipy.special``, ``.stats``, ``.linalg``, ``.signal``, ``.fft`` and
``.integrate``, usable directly (also for a name imported from SciPy before fusegrad, which
keeps SciPy's function). How the plain calls are reached: ``fusegrad.scipy._dispatch``.
``scipy.interpolate``'s ``CubicSpline``, ``CubicHermiteSpline``, ``PPoly`` and ``interp1d`` built
on traced data, and its splines built on plain data evaluated at traced points, work too
(``fusegrad.scipy.interpolate``).

Example::

    >>> import numpy as np, scipy.special, fusegrad as fg
    >>> fg.grad(lambda x: scipy.special.logsumexp(x))(np.zeros(2))
    array([0.5, 0.5])
"""

from ._dispatch import install

install()

__all__ = ["install"]
