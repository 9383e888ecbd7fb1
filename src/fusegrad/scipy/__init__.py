"""SciPy for traced values: plain SciPy calls work on them, and mirrors with SciPy's names.

After ``import fusegrad`` these SciPy functions differentiate as written, with no change of
imports: ``scipy.special.logsumexp``, ``softmax``, ``log_softmax``, ``polygamma``, ``zeta`` and
every ``scipy.special`` ufunc with a rule (``gammaln``, ``erf``, ``jv``, ...); the ``logpdf``,
``pdf``, ``logcdf``, ``cdf``, ``sf``, ``logsf``, ``logpmf`` and ``pmf`` methods of
``scipy.stats``'s ``norm``, ``t``, ``gamma``, ``beta``, ``expon``, ``laplace``, ``cauchy``,
``logistic``, ``poisson``, ``binom``, ``dirichlet`` and ``multivariate_normal`` (frozen or not);
``scipy.linalg``'s ``solve_triangular``, ``cholesky``, ``cho_factor``, ``cho_solve``, ``inv``,
``det``, ``solve``, ``expm``, ``sqrtm``, ``lu_factor`` and ``lu_solve``; ``scipy.signal.convolve``
and ``correlate``; ``scipy.integrate.odeint`` (adjoint method, first order). The same functions
are in ``fusegrad.scipy.special``, ``.stats``, ``.linalg``, ``.signal`` and ``.integrate``, usable
directly (also for a name imported from SciPy before fusegrad, which
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
