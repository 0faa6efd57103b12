"""Project knowledge and audit: ``torchwise project`` as a library.

Public API::

    from torchwise.project import gather_knowledge, audit_project, AuditOptions, render
    knowledge = gather_knowledge(Path("."))          # static: runs none of the project's code
    report = audit_project(Path("."), AuditOptions(doctor="off"))
    html = render(report, "html")

``gather_knowledge`` reads the tree, the dependency files and the code's syntax;
``audit_project`` adds review, checkpoint scan, and (unless
``AuditOptions(import_models=False)``) builds the project's models in a worker
process to inspect and doctor them. The results are the pydantic models of
:mod:`torchwise.project.schema`.
"""

from torchwise.project.audit import QUICK_CHECKS, AuditOptions, audit_project
from torchwise.project.knowledge import gather_knowledge
from torchwise.project.render import FORMATS, knowledge_markdown, render
from torchwise.project.schema import SCHEMA_VERSION, ProjectKnowledge, ProjectReport

__all__ = [
    "FORMATS",
    "QUICK_CHECKS",
    "SCHEMA_VERSION",
    "AuditOptions",
    "ProjectKnowledge",
    "ProjectReport",
    "audit_project",
    "gather_knowledge",
    "knowledge_markdown",
    "render",
]
