import json

from django.db import transaction
from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from .models import User
from .tasks import send_welcome_email


@csrf_exempt
@require_POST
def signup(request: HttpRequest) -> JsonResponse:
    email = json.loads(request.body)["email"]
    with transaction.atomic():  # the user and the job commit together, or neither does
        user = User.objects.create(email=email)
        result = send_welcome_email.enqueue(email)
    return JsonResponse({"user": user.pk, "job": result.id}, status=201)
