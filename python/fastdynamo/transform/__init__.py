"""Code generation: transformed code, graph breaks, resume functions and the fallback.

Consumes plans (:mod:`fastdynamo.plans`) and sources (:mod:`fastdynamo.guards.sources`)
and produces code objects; it never sees the translator (:mod:`fastdynamo.capture`).
"""
