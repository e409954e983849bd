import json

from django.db import transaction
from django.http import Http404, HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from .models import User
from .tasks import send_welcome_email

try:
    from django.tasks import default_task_backend
    from django.tasks.exceptions import TaskResultDoesNotExist
except ImportError:  # Django 5.2 with the django-tasks backport
    from django_tasks import default_task_backend
    from django_tasks.exceptions import TaskResultDoesNotExist


@csrf_exempt
@require_POST
def signup(request: HttpRequest) -> JsonResponse:
    email = json.loads(request.body)["email"]
    with transaction.atomic():  # the user and the job commit together, or neither does
        user = User.objects.create(email=email)
        result = send_welcome_email.enqueue(email)
    return JsonResponse({"user": user.pk, "job": result.id}, status=201)


def job(request: HttpRequest, job_id: str) -> JsonResponse:
    """A task's result, read back in a request (any task of TASKS["default"])."""
    try:
        result = default_task_backend.get_result(job_id)
    except TaskResultDoesNotExist:
        raise Http404(f"no task {job_id}") from None
    done = result.status == "SUCCESSFUL"
    return JsonResponse({"task": result.task.module_path, "status": result.status,
                         "return_value": result.return_value if done else None,
                         "errors": [e.exception_class_path for e in result.errors]})  # fmt: skip
