from django.urls import include, path

from bookings import views

urlpatterns = [
    path("signup", views.signup),
    path("api/cron/", include("tickq.contrib.django.urls")),
]
