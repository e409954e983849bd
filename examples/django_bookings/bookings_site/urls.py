from bookings import views
from django.urls import include, path

urlpatterns = [
    path("signup", views.signup),
    path("jobs/<str:job_id>", views.job),
    path("api/cron/", include("tickq.contrib.django.urls")),
]
